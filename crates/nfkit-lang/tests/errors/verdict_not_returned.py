def main() -> u64:
    x = DROP
    return 0
