from lib.common import helper
