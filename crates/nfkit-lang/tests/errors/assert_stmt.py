def main(a: u32) -> u32:
    assert a > 0
    return a
