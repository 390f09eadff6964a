def main(a: u32, b: u32, c: u32) -> u32:
    if a < b < c:
        return 1
    return 0
