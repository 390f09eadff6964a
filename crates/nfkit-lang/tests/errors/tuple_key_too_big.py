flows = HashMap((u64, u64, u32), u64, 1024)
