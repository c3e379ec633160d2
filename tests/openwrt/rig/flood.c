/*
 * A LAN device flooding a DNS server, for tests/openwrt/rig/net.sh: UDP
 * queries (A, recursion desired) for names never asked before, as fast as
 * PROCS processes can send them, for at most SECONDS and MAX queries in
 * all; the answers are never read. Prints the number of queries sent.
 *   flood ADDR PORT SECONDS MAX PROCS
 * Built by tests/openwrt/rig.sh with the host's gcc (static: it runs in the
 * rig's LAN namespace, on the rig's files).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Queries sent with one sendmmsg. */
#define BATCH 64
/* Hex digits of a name's counter label: 2^48 names per process. */
#define DIGITS 12

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* A query for <counter>.p<proc>.flood.example; returns its length. The
 * counter's label starts at byte 13 (header 12, its length byte 1). */
static size_t query(unsigned char *q, unsigned proc)
{
	static const unsigned char header[12] = { 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
	char label[16];
	size_t n = 0;
	int len;

	memcpy(q, header, sizeof(header));
	n = sizeof(header);
	q[n++] = DIGITS;
	memset(q + n, '0', DIGITS);
	n += DIGITS;
	len = snprintf(label, sizeof(label), "p%u", proc % 1000);
	q[n++] = (unsigned char)len;
	memcpy(q + n, label, (size_t)len);
	n += (size_t)len;
	q[n++] = 5;
	memcpy(q + n, "flood", 5);
	n += 5;
	q[n++] = 7;
	memcpy(q + n, "example", 7);
	n += 7;
	q[n++] = 0;
	q[n++] = 0;
	q[n++] = 1; /* A */
	q[n++] = 0;
	q[n++] = 1; /* IN */
	return n;
}

static void set_counter(unsigned char *q, uint64_t c)
{
	static const char hex[] = "0123456789abcdef";
	int i;

	q[0] = (unsigned char)(c >> 8);
	q[1] = (unsigned char)c;
	for (i = DIGITS - 1; i >= 0; i--) {
		q[13 + i] = (unsigned char)hex[c & 15];
		c >>= 4;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in to;
	double seconds, end;
	unsigned long long max, share, *sent;
	unsigned procs, p;
	uint64_t total = 0;

	if (argc != 6) {
		fprintf(stderr, "usage: flood ADDR PORT SECONDS MAX PROCS\n");
		return 2;
	}
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_port = htons((uint16_t)atoi(argv[2]));
	if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) {
		fprintf(stderr, "flood: not an IPv4 address: %s\n", argv[1]);
		return 2;
	}
	seconds = atof(argv[3]);
	max = strtoull(argv[4], NULL, 10);
	procs = (unsigned)atoi(argv[5]);
	if (seconds <= 0 || seconds > 60 || max == 0 || procs == 0 || procs > 16) {
		fprintf(stderr, "flood: SECONDS 0-60, MAX > 0, PROCS 1-16\n");
		return 2;
	}
	share = max / procs;
	if (share == 0)
		share = 1;
	sent = mmap(NULL, procs * sizeof(*sent), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sent == MAP_FAILED) {
		perror("flood: mmap");
		return 1;
	}
	end = now() + seconds;
	for (p = 0; p < procs; p++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("flood: fork");
			return 1;
		}
		if (pid == 0) {
			static unsigned char q[BATCH][64];
			struct mmsghdr msgs[BATCH];
			struct iovec iov[BATCH];
			uint64_t c = 0;
			size_t len = 0;
			int s = socket(AF_INET, SOCK_DGRAM, 0), i, r;

			if (s < 0 || connect(s, (struct sockaddr *)&to, sizeof(to)) < 0) {
				perror("flood: socket");
				_exit(1);
			}
			for (i = 0; i < BATCH; i++)
				len = query(q[i], p);
			memset(msgs, 0, sizeof(msgs));
			for (i = 0; i < BATCH; i++) {
				iov[i].iov_base = q[i];
				iov[i].iov_len = len;
				msgs[i].msg_hdr.msg_iov = &iov[i];
				msgs[i].msg_hdr.msg_iovlen = 1;
			}
			while (c < share && now() < end) {
				unsigned n = share - c < BATCH ? (unsigned)(share - c) : BATCH;

				for (i = 0; i < (int)n; i++)
					set_counter(q[i], c + (uint64_t)i);
				r = sendmmsg(s, msgs, n, 0);
				/* A full queue (ENOBUFS, ECONNREFUSED from an ICMP
				 * error) is the point: go on. */
				if (r > 0)
					c += (uint64_t)r;
			}
			sent[p] = c;
			_exit(0);
		}
	}
	for (p = 0; p < procs; p++)
		wait(NULL);
	for (p = 0; p < procs; p++)
		total += sent[p];
	printf("%llu\n", (unsigned long long)total);
	return 0;
}
