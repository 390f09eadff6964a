def main() -> u32:
    x: u32 = 0
    while x < 3:
        x += 1
    else:
        pass
    return 0
