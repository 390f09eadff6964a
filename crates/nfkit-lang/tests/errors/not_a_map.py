LIMIT = 10

def main() -> u64:
    return LIMIT[3]
