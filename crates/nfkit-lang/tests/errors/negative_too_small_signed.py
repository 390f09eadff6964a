def main() -> s64:
    x: s8 = -200
    return s64(x)
