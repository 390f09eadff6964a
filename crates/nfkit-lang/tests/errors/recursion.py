def ping(n: u32) -> u32:
    return pong(n)

def pong(n: u32) -> u32:
    return ping(n)
