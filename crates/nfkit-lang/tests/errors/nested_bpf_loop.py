LOOP_CAP = 16

def main(n: u32) -> u32:
    s: u32 = 0
    for i in range(n, cap=100000):
        for j in range(4):
            while s < n:
                s += 1
        for k in range(n, cap=5000):
            s += k
    return s
