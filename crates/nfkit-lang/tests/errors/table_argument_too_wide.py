R = Table(keys={"ip.dst": "lpm"}, actions=[REDIRECT, DROP], size=8, default=DROP,
          entries=[("198.18.0.0/16", REDIRECT, 1 << 56)])
