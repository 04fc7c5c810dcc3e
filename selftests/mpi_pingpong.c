// SPDX-License-Identifier: GPL-2.0
/*
 * Two-rank MPI check for selftests/test_mpi.sh: a ping-pong of 64 B to
 * 1 MiB messages, each message's content checked by its receiver (rank 1
 * answers with a different pattern, so an echo of the request's own bytes
 * fails), then MPI_Allreduce of an integer and a double vector, checked
 * against the sums computed locally. Rank 0 prints one line per size and
 * "PASS mpi_pingpong" when every check on both ranks held; any mismatch
 * prints what differed and the program exits 1.
 * MPI_PINGPONG_CORRUPT=1 makes rank 1 corrupt one byte, to show that the
 * check catches it.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_SIZE 64
#define MAX_SIZE (1 << 20)
#define VEC_LEN 4096

/* Byte i of message `iter` of `size` bytes sent by `rank`. */
static uint8_t pattern(int rank, size_t size, int iter, size_t i)
{
	uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(size * 40503u) ^
		     (uint32_t)(iter * 97u) ^ (uint32_t)(rank * 0x5bd1e995u);
	return (uint8_t)(x ^ (x >> 13) ^ (x >> 24));
}

static void fill(uint8_t *buf, int rank, size_t size, int iter)
{
	for (size_t i = 0; i < size; i++)
		buf[i] = pattern(rank, size, iter, i);
}

/* Counts the bytes that differ from what `from` sent; reports the first. */
static long verify(const uint8_t *buf, int from, int me, size_t size, int iter)
{
	long bad = 0;

	for (size_t i = 0; i < size; i++) {
		uint8_t want = pattern(from, size, iter, i);

		if (buf[i] != want && bad++ == 0)
			fprintf(stderr, "rank %d: %zu B message %d: byte %zu is 0x%02x, want 0x%02x\n",
				me, size, iter, i, buf[i], want);
	}
	return bad;
}

static int iterations(size_t size)
{
	/* Enough to time, short enough for an emulated guest. */
	return size <= 4096 ? 200 : size <= 65536 ? 50 : 10;
}

int main(int argc, char **argv)
{
	int rank, nranks;
	long errors = 0, all_errors = 0;
	uint8_t *sbuf, *rbuf;
	unsigned long long sent = 0;
	/*
	 * MPI_PINGPONG_CORRUPT=1: rank 1 flips a byte of its first answer and
	 * only 64 B messages are sent, to show that a corruption is caught.
	 */
	const char *corrupt_env = getenv("MPI_PINGPONG_CORRUPT");
	int corrupt = corrupt_env && strcmp(corrupt_env, "1") == 0;
	size_t max_size = corrupt ? MIN_SIZE : MAX_SIZE;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_pingpong needs exactly 2 ranks, not %d\n", nranks);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	{
		/* Where each rank runs and which devices UCX was given. */
		char me[MPI_MAX_PROCESSOR_NAME + 64] = "";
		char where[2][sizeof(me)] = { "", "" };
		char name[MPI_MAX_PROCESSOR_NAME] = "";
		const char *devs = getenv("UCX_NET_DEVICES");
		int len;

		MPI_Get_processor_name(name, &len);
		snprintf(me, sizeof(me), "%s (UCX_NET_DEVICES=%s)", name, devs ? devs : "unset");
		MPI_Gather(me, sizeof(me), MPI_CHAR, where, sizeof(me), MPI_CHAR, 0,
			   MPI_COMM_WORLD);
		if (rank == 0)
			printf("rank 0 on %s, rank 1 on %s\n", where[0], where[1]);
	}
	sbuf = malloc(MAX_SIZE);
	rbuf = malloc(MAX_SIZE);
	if (!sbuf || !rbuf) {
		fprintf(stderr, "rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	for (size_t size = MIN_SIZE; size <= max_size; size *= 2) {
		int n = iterations(size);
		double t0, t;

		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (int it = 0; it < n; it++) {
			/* The receive buffer starts as neither side's pattern. */
			memset(rbuf, 0xa5, size);
			if (rank == 0) {
				fill(sbuf, 0, size, it);
				MPI_Send(sbuf, (int)size, MPI_BYTE, 1, it, MPI_COMM_WORLD);
				MPI_Recv(rbuf, (int)size, MPI_BYTE, 1, it, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				errors += verify(rbuf, 1, 0, size, it);
			} else {
				MPI_Recv(rbuf, (int)size, MPI_BYTE, 0, it, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				errors += verify(rbuf, 0, 1, size, it);
				fill(sbuf, 1, size, it);
				if (corrupt && it == 0)
					sbuf[size / 2] ^= 0x01;
				MPI_Send(sbuf, (int)size, MPI_BYTE, 0, it, MPI_COMM_WORLD);
			}
		}
		t = MPI_Wtime() - t0;
		sent += (unsigned long long)n * size;
		/* Timed with the pattern work included: a floor, not a benchmark. */
		if (rank == 0)
			printf("pingpong %7zu B x %3d: %9.1f us half round trip, %8.2f MB/s\n",
			       size, n, t / n / 2 * 1e6, 2.0 * n * size / t / 1e6);
	}

	{
		long ivec[VEC_LEN], isum[VEC_LEN];
		double dvec[VEC_LEN], dsum[VEC_LEN];
		long bad = 0;

		for (int i = 0; i < VEC_LEN; i++) {
			ivec[i] = (long)(rank + 1) * (i + 1) * 1000003L;
			dvec[i] = (rank + 1) * 0.5 * i;
		}
		MPI_Allreduce(ivec, isum, VEC_LEN, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		MPI_Allreduce(dvec, dsum, VEC_LEN, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		/* Ranks 1 and 2 (rank + 1) sum to 3 times the unit value, exactly. */
		for (int i = 0; i < VEC_LEN; i++) {
			if (isum[i] != 3L * (i + 1) * 1000003L || dsum[i] != 1.5 * i) {
				if (bad++ == 0)
					fprintf(stderr, "rank %d: allreduce element %d is %ld/%g, want %ld/%g\n",
						rank, i, isum[i], dsum[i], 3L * (i + 1) * 1000003L, 1.5 * i);
			}
		}
		errors += bad;
		if (rank == 0 && bad == 0)
			printf("allreduce of %d longs and %d doubles: sums correct\n", VEC_LEN, VEC_LEN);
	}

	MPI_Allreduce(&errors, &all_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	free(sbuf);
	free(rbuf);
	if (rank == 0) {
		printf("each rank sent %llu B of ping-pong messages\n", sent);
		if (all_errors == 0)
			printf("PASS mpi_pingpong: %d to %zu B ping-pong and allreduce verified on both ranks\n",
			       MIN_SIZE, max_size);
		else
			printf("FAIL mpi_pingpong: %ld mismatched bytes or elements\n", all_errors);
	}
	MPI_Finalize();
	return all_errors == 0 ? 0 : 1;
}
