def main() -> u32:
    for x in foo:
        pass
    return 0
