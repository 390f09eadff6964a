def main() -> u32:
    try:
        pass
    except Exception:
        pass
    return 0
