def main() -> u32:
    s = "hello"
    return 0
