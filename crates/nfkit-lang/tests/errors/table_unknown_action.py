ACL = Table(keys={"ip.proto": "ternary"}, actions=[DROP, limit], size=8, default=DROP)
