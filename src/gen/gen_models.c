/* gen_models.c - the table of gen's models, above the models and the helpers they share
 * (gen_common.c calls no model: no circle between the files of src/gen). */
#include "gen/gen.h"
#include <string.h>

const gen_model *gen_model_find(const char *name)
{
	static const gen_model *const all[] = { &gen_model_train, &gen_model_serve, &gen_model_iid, &gen_model_phase };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}
