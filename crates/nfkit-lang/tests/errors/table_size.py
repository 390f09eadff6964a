ACL = Table(keys={"ip.proto": "ternary"}, actions=[DROP], size=5000, default=DROP)
