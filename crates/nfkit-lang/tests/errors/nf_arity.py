from nf.meter import tb_dst

def main() -> u64:
    return tb_dst(10)
