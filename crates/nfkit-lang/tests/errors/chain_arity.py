def helper(a: u32, b: u32) -> u32:
    return a + b

def main() -> u32:
    return helper(1)
