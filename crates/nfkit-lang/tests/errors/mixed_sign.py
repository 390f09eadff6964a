def main(a: u32, b: s32) -> u32:
    return a + b
