def main() -> u32:
    global counter
    return 0
