def main() -> u32:
    with open("x") as f:
        pass
    return 0
