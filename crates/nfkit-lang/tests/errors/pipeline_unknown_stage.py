def pre() -> u64:
    return 0

pipeline(pre=pre, tables=[ROUTES])
