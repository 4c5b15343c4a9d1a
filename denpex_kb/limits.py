"""What a scan keeps is bounded whatever the input (an endless pipe, a log of distinct garbage): these bounds are
shared by the collector (`scanner`) and the workers that fold repeats before it (`passes`)."""

MAX_FINDINGS = 10_000  # distinct findings
MAX_RANKS = 1 << 17  # ranks per finding
MAX_HOSTS = 64  # host names per finding
MAX_OPEN = 1 << 16  # open tracebacks and fingerprint sequences being followed
MAX_VERSIONS = 64  # packages whose version a scan remembers
MAX_NAMED = 1_000  # unknown exceptions handed to the fuzzy tier per scan: its cost stays bounded
MEMO_LINES = 4_096  # distinct normalised lines whose facts a scan (or a worker) remembers at a time
