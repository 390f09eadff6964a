LOOP_CAP = 16

def main(n: u32) -> u32:
    k: u32 = 0
    while k < n:
        k += 1
    for i in range(n):
        k += 1
    return k // 0
