m = HashMap(bool, u64, 16)
