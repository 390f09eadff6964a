def main(a: u32) -> u32:
    b = a > 3
    return b + 1
