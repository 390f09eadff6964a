from nf.meter import tb_nope
