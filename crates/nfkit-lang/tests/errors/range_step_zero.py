def main() -> u64:
    for i in range(0, 10, 0):
        pass
    return 0
