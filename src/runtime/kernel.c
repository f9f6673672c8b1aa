#include "runtime/kernel.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/err.h"

#define STREAM_CAP 256

struct kb_kernel_run {
	kb_kernel_fn fn;
	void *args;
	kb_tl *tl;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t can_push, can_pop;
	kb_cmd *ring[STREAM_CAP];
	size_t head, count;
	int stopped;             /* consumer gone */
	int producer_waiting, consumer_waiting;
};

/* Producer side (the kernel thread): blocks while the stream is full. */
static int stream_push(void *ctx, kb_cmd *c)
{
	kb_kernel_run *k = ctx;

	pthread_mutex_lock(&k->mu);
	while (k->count == STREAM_CAP && !k->stopped) {
		k->producer_waiting = 1;
		pthread_cond_wait(&k->can_push, &k->mu);
		k->producer_waiting = 0;
	}
	if (k->stopped) {
		pthread_mutex_unlock(&k->mu);
		kb__cmd_free(c);
		return -1;
	}
	k->ring[(k->head + k->count++) % STREAM_CAP] = c;
	if (k->consumer_waiting)
		pthread_cond_signal(&k->can_pop);
	pthread_mutex_unlock(&k->mu);
	return 0;
}

/* Consumer side (PE_CPU): the kernel always ends with END or ERROR, so a
 * command always comes; the wait is wall-clock only. */
kb_cmd *kb__kernel_next(void *run)
{
	kb_kernel_run *k = run;
	kb_cmd *c;

	pthread_mutex_lock(&k->mu);
	while (k->count == 0) {
		k->consumer_waiting = 1;
		pthread_cond_wait(&k->can_pop, &k->mu);
		k->consumer_waiting = 0;
	}
	c = k->ring[k->head];
	k->head = (k->head + 1) % STREAM_CAP;
	k->count--;
	/* Wake the producer only once half the ring is free: fewer handoffs. */
	if (k->producer_waiting && k->count <= STREAM_CAP / 2)
		pthread_cond_signal(&k->can_push);
	pthread_mutex_unlock(&k->mu);
	return c;
}

static void *kernel_main(void *arg)
{
	kb_kernel_run *k = arg;

	k->fn(k->tl, k->args);
	kb__tl_finish(k->tl);
	return NULL;
}

int kb__kernel_create(kb_kernel_run **out, kb_kernel_fn fn, void *args, const kb_tl_config *cfg,
		      kb_error *err)
{
	kb_kernel_run *k = calloc(1, sizeof(*k));
	kb_tl_config c = *cfg;

	*out = NULL;
	if (!k)
		return kb__err(err, KB_ENOMEM, "out of memory launching a kernel");
	k->fn = fn;
	k->args = args;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->can_push, NULL);
	pthread_cond_init(&k->can_pop, NULL);
	c.emit = stream_push;
	c.emit_ctx = k;
	k->tl = kb__tl_create(&c);
	if (!k->tl) {
		kb__kernel_destroy(k);
		return kb__err(err, KB_ENOMEM, "out of memory launching a kernel");
	}
	*out = k;
	return KB_OK;
}

int kb__kernel_start(kb_kernel_run *k, kb_error *err)
{
	if (pthread_create(&k->thread, NULL, kernel_main, k))
		return kb__err(err, KB_ENOMEM, "cannot start a kernel thread");
	k->started = 1;
	return KB_OK;
}

void kb__kernel_stop(kb_kernel_run *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	k->stopped = 1;
	pthread_cond_broadcast(&k->can_push);
	pthread_mutex_unlock(&k->mu);
	if (k->started) {
		pthread_join(k->thread, NULL);
		k->started = 0;
	}
}

void kb__kernel_destroy(kb_kernel_run *k)
{
	if (!k)
		return;
	kb__kernel_stop(k);
	while (k->count) {
		kb__cmd_free(k->ring[k->head]);
		k->head = (k->head + 1) % STREAM_CAP;
		k->count--;
	}
	kb__tl_destroy(k->tl);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->can_push);
	pthread_cond_destroy(&k->can_pop);
	free(k);
}

uint64_t kb__kernel_commands(const kb_kernel_run *k)
{
	return k && k->tl ? kb__tl_commands(k->tl) : 0;
}
