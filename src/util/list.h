/* list.h - the one intrusive doubly linked list loom uses everywhere.  A
 * list head is a node whose next/prev point at itself when empty.
 *
 *   head <-> a <-> b <-> c <-> head
 */
#ifndef LOOM_UTIL_LIST_H
#define LOOM_UTIL_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct lm_list {
	struct lm_list *next, *prev;
};

#define LM_LIST_INIT(name) {&(name), &(name)}
#define lm_container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define lm_list_entry(node, type, member)  lm_container_of(node, type, member)

static inline void lm_list_init(struct lm_list *head)
{
	head->next = head->prev = head;
}

static inline bool lm_list_empty(const struct lm_list *head)
{
	return head->next == head;
}

static inline void lm_list__insert(struct lm_list *n, struct lm_list *prev,
				   struct lm_list *next)
{
	n->next = next;
	n->prev = prev;
	prev->next = n;
	next->prev = n;
}

static inline void lm_list_push_back(struct lm_list *head, struct lm_list *n)
{
	lm_list__insert(n, head->prev, head);
}

static inline void lm_list_push_front(struct lm_list *head, struct lm_list *n)
{
	lm_list__insert(n, head, head->next);
}

/* Insert n just before pos (pos may be the head: then it is push_back). */
static inline void lm_list_insert_before(struct lm_list *pos, struct lm_list *n)
{
	lm_list__insert(n, pos->prev, pos);
}

static inline void lm_list_remove(struct lm_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

static inline struct lm_list *lm_list_pop_front(struct lm_list *head)
{
	struct lm_list *n = head->next;

	if (n == head)
		return NULL;
	lm_list_remove(n);
	return n;
}

static inline struct lm_list *lm_list_front(const struct lm_list *head)
{
	return head->next == head ? NULL : head->next;
}

/* Move every node of src to the end of dst; src ends empty. */
static inline void lm_list_splice_back(struct lm_list *dst, struct lm_list *src)
{
	if (lm_list_empty(src))
		return;
	src->next->prev = dst->prev;
	dst->prev->next = src->next;
	src->prev->next = dst;
	dst->prev = src->prev;
	lm_list_init(src);
}

#define lm_list_foreach(head, it) for ((it) = (head)->next; (it) != (head); (it) = (it)->next)

/* Safe against removal of it inside the loop. */
#define lm_list_foreach_safe(head, it, tmp)                                              \
	for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head);                    \
	     (it) = (tmp), (tmp) = (it)->next)

#endif
