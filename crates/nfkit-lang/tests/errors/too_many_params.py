def main(a: u32, b: u32, c: u32, d: u32, e: u32) -> u32:
    return a
