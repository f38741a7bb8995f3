/* pkwalk.c - the baseline of scripts/bench.sh's decoder line: a plain walk over a pickle's opcodes
 * (protocols 2-5, the opcodes PyTorch's snapshots use and the other common ones), each argument
 * skipped or read as a number, nothing built, nothing checked but the bounds. What any decoder must
 * at least do; allocsim's reader does this and builds, validates and turns entries into events.
 * usage: pkwalk FILE (an uncompressed pickle) -> "OPCODES CHECKSUM" on standard output; exit 1 on an
 * opcode it does not know or a truncated file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	FILE *f = fopen(argv[1], "rb");
	if (!f)
		return 2;
	size_t cap = 1 << 20, n = 0, got;
	unsigned char *b = malloc(cap);
	while (b && (got = fread(b + n, 1, cap - n, f)) > 0)
		if ((n += got) == cap)
			b = realloc(b, cap *= 2);
	fclose(f);
	if (!b)
		return 2;
	const unsigned char *c = b, *e = b + n;
	uint64_t ops = 0, sum = 0;
	while (c < e) {
		int op = *c++;
		uint64_t len = 0, arg = 0;
		ops++;
		switch (op) {
		case 0x80: case 'K': case 'h': case 'q': len = 1; break;           /* PROTO BININT1 BINGET BINPUT */
		case 'M': len = 2; break;                                          /* BININT2 */
		case 'J': case 'j': case 'r': len = 4; break;                      /* BININT LONG_BINGET LONG_BINPUT */
		case 'G': case 0x95: len = 8; break;                               /* BINFLOAT FRAME */
		case 0x8a: if (c >= e) goto bad; len = 1 + *c; break;               /* LONG1 */
		case 0x8c: case 'C': if (c >= e) goto bad; len = 1 + *c; break;     /* SHORT_BINUNICODE SHORT_BINBYTES */
		case 'X': case 'B': case 0x8d: case 0x8e: case 0x96:                /* BINUNICODE BINBYTES, 8-byte ones */
			if (op == 'X' || op == 'B') {
				if (e - c < 4) goto bad;
				len = 4 + le(c, 4);
			} else {
				if (e - c < 8) goto bad;
				len = 8 + le(c, 8);
			}
			break;
		case 'c': /* GLOBAL: two lines */
			for (int k = 0; k < 2; k++) {
				while (c < e && *c != '\n')
					c++;
				if (c++ >= e) goto bad;
			}
			continue;
		case '}': case ']': case ')': case '(': case 0x94: case 'N': case 0x88: case 0x89:
		case 0x85: case 0x86: case 0x87: case 't': case 'a': case 'e': case 's': case 'u':
		case 'R': case 'b': case 0x93: case 0x81: case 0x92: case '0': case '2': case 0x8f: case 0x90: case 0x91:
			continue;
		case '.':
			if (c != e)
				goto bad;
			continue;
		default:
			goto bad;
		}
		if ((uint64_t)(e - c) < len)
			goto bad;
		if (len <= 8)
			arg = le(c, (int)len);
		sum += arg;
		c += len;
	}
	printf("%llu %llu\n", (unsigned long long)ops, (unsigned long long)sum);
	free(b);
	return 0;
bad:
	fprintf(stderr, "pkwalk: %s: opcode 0x%02x at byte %td not walked\n", argv[1], c[-1], c - 1 - b);
	return 1;
}
