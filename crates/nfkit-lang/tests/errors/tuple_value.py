def main(a: u32) -> u64:
    x = (a, a)
    return 0
