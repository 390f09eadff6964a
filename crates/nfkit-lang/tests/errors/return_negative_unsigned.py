def main() -> u64:
    return -1
