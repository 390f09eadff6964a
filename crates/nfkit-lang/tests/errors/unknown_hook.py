attach("eth0", "netfilter")
