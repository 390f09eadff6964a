m = HashMap(u32, 1024)
