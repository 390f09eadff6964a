def main(a: u8) -> u8:
    return a + 300
