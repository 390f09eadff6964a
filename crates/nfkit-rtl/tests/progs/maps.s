# Map calls for the RTL tests, driven by the packet (XDP; frames shorter
# than 64 bytes answer 0): byte 0 the operation (0 lookup, 1 update, 2 delete), byte 1 the
# map (0..3), byte 2 the update's flags; bytes 8..32 the key, 32..56 the
# value, both copied to the stack. A lookup that hits adds 1 to the
# value's first 8 bytes through the pointer and answers the new count.
    r6 = *(u32 *)(r1 + 0)
    r2 = *(u32 *)(r1 + 4)
    r3 = r6
    r3 += 64
    if r3 > r2 goto miss
    r3 = *(u64 *)(r6 + 8)
    *(u64 *)(r10 - 32) = r3
    r3 = *(u64 *)(r6 + 16)
    *(u64 *)(r10 - 24) = r3
    r3 = *(u64 *)(r6 + 24)
    *(u64 *)(r10 - 16) = r3
    r3 = *(u64 *)(r6 + 32)
    *(u64 *)(r10 - 64) = r3
    r3 = *(u64 *)(r6 + 40)
    *(u64 *)(r10 - 56) = r3
    r3 = *(u64 *)(r6 + 48)
    *(u64 *)(r10 - 48) = r3
    r7 = *(u8 *)(r6 + 0)
    r8 = *(u8 *)(r6 + 1)
    r9 = *(u8 *)(r6 + 2)
    r1 = map_idx(0) ll
    if r8 == 0 goto have_map
    r1 = map_idx(1) ll
    if r8 == 1 goto have_map
    r1 = map_idx(2) ll
    if r8 == 2 goto have_map
    r1 = map_idx(3) ll
have_map:
    r2 = r10
    r2 += -32
    if r7 == 0 goto lookup
    if r7 == 1 goto update
    call 3
    exit
update:
    r3 = r10
    r3 += -64
    r4 = r9
    call 2
    exit
lookup:
    call 1
    if r0 == 0 goto miss
    r2 = *(u64 *)(r0 + 0)
    r2 += 1
    *(u64 *)(r0 + 0) = r2
    r0 = r2
    exit
miss:
    r0 = 0
    exit
