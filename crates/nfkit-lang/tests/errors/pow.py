def main(a: u32) -> u32:
    return a ** 2
