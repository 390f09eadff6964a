# An XDP reflector for the RTL tests: IPv4 frames get their MAC addresses
# swapped and their TTL decremented (checksum updated incrementally) and go
# back out (XDP_TX); TTL <= 1 and runts are dropped, other frames pass.
    r2 = *(u32 *)(r1 + 0)
    r3 = *(u32 *)(r1 + 4)
    r4 = r2
    r4 += 34
    if r4 > r3 goto drop
    r5 = *(u16 *)(r2 + 12)
    if r5 != 8 goto pass
    r6 = *(u32 *)(r2 + 0)
    r7 = *(u16 *)(r2 + 4)
    r8 = *(u32 *)(r2 + 6)
    r9 = *(u16 *)(r2 + 10)
    *(u32 *)(r2 + 0) = r8
    *(u16 *)(r2 + 4) = r9
    *(u32 *)(r2 + 6) = r6
    *(u16 *)(r2 + 10) = r7
    r6 = *(u8 *)(r2 + 22)
    if r6 <= 1 goto drop
    r6 += -1
    *(u8 *)(r2 + 22) = r6
    r7 = *(u16 *)(r2 + 24)
    r7 = be16 r7
    r7 += 256
    r8 = r7
    r8 >>= 16
    r7 &= 65535
    r7 += r8
    r7 = be16 r7
    *(u16 *)(r2 + 24) = r7
    *(u64 *)(r10 - 8) = r7
    r0 = *(u64 *)(r10 - 8)
    r0 = 3
    exit
pass:
    r0 = 2
    exit
drop:
    r0 = 1
    exit
