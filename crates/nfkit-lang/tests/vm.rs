//! Compiled chains running in the VM on crafted packets.

mod common;
use common::*;

const TTL: &str = r#"
from nf.classify import every_packet
cnt = ArrayMap(u64, 4)

def main() -> u64:
    ttl: u8 = Packet.read_u8(22)
    if ttl < 10:
        cnt[1] += 1
        return DROP
    cnt[0] += 1
    Packet.write_u8(22, ttl - 1)
    return PASS

every_packet(main)
"#;

#[test]
fn straight_line_chain_reads_writes_and_counts() {
    let (c, mut vm) = load(TTL);
    let p = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1000, 53, 0, 64, b"hello");
    let o = run(&mut vm, &p);
    assert_eq!(o.code, XDP_PASS);
    assert_eq!(o.packet[22], 63);
    let o = run(
        &mut vm,
        &udp4([198, 18, 0, 1], [198, 18, 0, 2], 1000, 53, 0, 5, b""),
    );
    assert_eq!(o.code, XDP_DROP);
    assert_eq!(map(&c, &vm, "cnt"), vec![(0, 1), (1, 1)]);
    let st = vm.stats();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].chain, "main");
    assert_eq!(st[0].counts[1], 1);
    assert_eq!(st[0].counts[2], 1);
}
