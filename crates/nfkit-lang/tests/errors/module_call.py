from nf.base import drop

drop()
