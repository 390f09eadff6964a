def main(a: u32) -> u32:
    if a is 3:
        return 1
    return 0
