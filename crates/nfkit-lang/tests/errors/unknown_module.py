from nf.nosuchmodule import foo
