@cached
def main() -> u32:
    return 0
