/* dtr: the command-line front of the library. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const dtr_cli_command_t *const dtr__commands[] = {
    &dtr_cli_layout,
    &dtr_cli_plan,
    &dtr_cli_run,
    &dtr_cli_grad,
    &dtr_cli_reshard,
};
#define DTR__NCOMMANDS (sizeof dtr__commands / sizeof dtr__commands[0])

static void dtr__help(FILE *out) {
    fputs("usage: dtr COMMAND [OPTIONS]\n"
          "       dtr --help | --version\n"
          "\n"
          "DTensor placement and redistribution: how a tensor is spread over a mesh of\n"
          "devices, and how to move it from one layout to another.\n"
          "\n"
          "commands:\n",
          out);
    for (size_t i = 0; i < DTR__NCOMMANDS; i++)
        fprintf(out, "  %-10s %s\n", dtr__commands[i]->name, dtr__commands[i]->summary);
    fputs("\n"
          "placements: S(d) shard tensor dim d, R replicate, P(op) partial (sum, avg, max,\n"
          "            min, product; P means P(sum)); one per mesh dim, e.g. 'S(0),R';\n"
          "            S(d)[k] a shard order (PyTorch's; _S(d, sf) is read as one);\n"
          "            S(d){3,0,5,2} a ragged shard: one size per rank of the mesh dim\n"
          "dtypes:     ",
          out);
    for (int d = 0; d < DTR_DTYPE_LAST; d++)
        fprintf(out, "%s%s", d ? ", " : "", dtr_dtype_name((dtr_dtype_t)d));
    fputs("\n\n"
          "examples:\n"
          "  dtr layout --mesh 2x2 --shape 2x5 --placements 'S(1),S(1)'\n"
          "  dtr layout --mesh 4 --shape 5 --placements 'S(0)' --json\n"
          "  dtr plan --mesh 2x2 --shape 8x8 --from 'S(0),S(1)' --to 'S(1),S(0)' --compare\n"
          "  mpirun -n 4 dtr run --mesh 2x2 --shape 64x64 --from 'S(0),R' --to 'R,S(1)' --verify\n"
          "  mpirun -n 8 dtr grad --mode hsdp --mesh 2x4 --dtype bf16 --microbatches 2 --verify\n"
          "\n"
          "'dtr COMMAND --help' explains a command. Environment: DTR_DEBUG=WARN|INFO|TRACE\n"
          "logs the library's decisions to stderr.\n"
          "\n"
          "exit status, every command (a library failure's from its status's class, the\n"
          "table the Python package's exceptions come from too: dtr_status_class):\n"
          "  0  done (planned; run and, with --verify, verified)\n"
          "  1  a run failed or did not verify (rank 0 says why, once, naming the ranks)\n"
          "  2  bad usage: an unknown flag, unreadable text, a missing or malformed argument,\n"
          "     an input file that cannot be read (Python: ArgumentError, FileError)\n"
          "  3  the change was refused: well-formed, but no strategy plans it (P(sum) ->\n"
          "     P(avg), S -> P(max)) or the chosen one will not (compat where the seed plan would\n"
          "     misplace data); the message says which (Python: RefusedError)\n",
          out);
}

/* An error before any command runs (so before MPI starts): said by the launcher's rank 0
 * only (mpirun, srun and torchrun name it in the environment), not once per rank. */
static void dtr__say_once(const char *fmt, const char *text) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                       "SLURM_PROCID", "RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0') {
            if (strcmp(v, "0") != 0) return;
            break;
        }
    }
    dtr_cli_say(fmt, text);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        dtr__say_once("dtr: missing command (see 'dtr --help')%s", "");
        return DTR_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        if (strcmp(cmd, "help") == 0 && argc > 2) {
            for (size_t i = 0; i < DTR__NCOMMANDS; i++)
                if (strcmp(argv[2], dtr__commands[i]->name) == 0) {
                    dtr__commands[i]->help(stdout);
                    return DTR_EXIT_OK;
                }
            dtr__say_once("dtr: unknown command '%s' (see 'dtr --help')", argv[2]);
            return DTR_EXIT_USAGE;
        }
        dtr__help(stdout);
        return DTR_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("dtr %s\n", dtr_version_string());
        return DTR_EXIT_OK;
    }
    for (size_t i = 0; i < DTR__NCOMMANDS; i++)
        if (strcmp(cmd, dtr__commands[i]->name) == 0)
            return dtr__commands[i]->main(argc - 1, argv + 1);
    dtr__say_once("dtr: unknown command '%s' (see 'dtr --help')", cmd);
    return DTR_EXIT_USAGE;
}
