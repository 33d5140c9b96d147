// Command genesis is the command-line client of the Genesis Sandbox HTTP
// API v1. It is a thin layer over the public client package.
//
//	genesis sandbox create|ls|get|rm         manage sandboxes
//	genesis sandbox pause|resume|hibernate|snapshot|fork|rollback   keep a sandbox's state
//	genesis snapshot ls|get|rm               snapshots (create --snapshot starts from one)
//	genesis volume create|ls|get|rm|cp       named volumes (create --volume NAME:/PATH[:ro] mounts one)
//	genesis exec SANDBOX -- CMD ARGS         run a command and relay its output
//	genesis exec --stream SANDBOX -- CMD     ... live, resuming after disconnects
//	genesis exec --background SANDBOX -- CMD start a job and print its id
//	genesis logs [-f] [--cursor N] JOB       print (or follow) a job's output
//	genesis cancel JOB                       cancel a background job
//	genesis job get ID                       show a job record
//	genesis artifacts ls JOB | get ID [-o F] list and download the files a job kept
//	genesis cp SRC DST                       copy files/directories, SANDBOX:PATH on one side
//	genesis ls | cat | find | replace        browse, read, search and edit sandbox files
//	genesis session create|get|exec|rm       shell sessions that keep cwd and env
//	genesis context create|get|rm            Python code contexts
//	genesis run-code (--context CTX | SANDBOX) CODE   run Python code
//	genesis shell [--terminal ID] SANDBOX    interactive terminal (raw mode)
//	genesis capabilities | profiles          show what the service can do
//	genesis whoami                           the tenant of the key, admin or not
//	genesis mcp run|ls|get|rm|tools|pins|approve|calls|catalog|stdio   MCP servers in sandboxes
//	genesis mcp serve                        the service's own sandbox tools to a stdio MCP client
//	genesis skill push|ls|get|revisions|cat|run   skills: push folders with SKILL.md, run their scripts
//	genesis e2b env|ls                       point the E2B SDKs here; their view of the sandboxes
//	genesis version                          show the CLI build
//
// Exit status: 0 on success, 1 on errors, 2 on usage errors; genesis exec,
// session exec, logs -f and skill run exit with the job's exit status;
// run-code exits 1 when the code raised.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &app{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
		now:    time.Now,
	})
	stop()
	os.Exit(code)
}

// run executes one invocation with the given arguments and returns the
// process exit status.
func run(ctx context.Context, args []string, a *app) int {
	root := newRootCmd(a)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return a.report(cmd, err)
}

// newRootCmd builds the command tree; every subcommand is wired here.
func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "genesis",
		Short:         "Command-line client of the Genesis Sandbox service",
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return a.validateGlobals()
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{err: err}
	})
	root.CompletionOptions.DisableDefaultCmd = true

	f := root.PersistentFlags()
	f.StringVar(&a.url, "url", "", "service URL (default $GENESIS_URL, else http://127.0.0.1:8080)")
	f.StringVar(&a.apiKey, "api-key", "", "API key (default $GENESIS_API_KEY)")
	f.StringVar(&a.actAs, "as", "", "with an admin key, act for this tenant (its sandboxes, jobs, files, …; sent as X-Genesis-Tenant)")
	f.StringVarP(&a.output, "output", "o", outputText, "output format: text or json")
	f.DurationVar(&a.timeout, "timeout", defaultTimeout, "time limit of each API call (0: none)")

	root.AddCommand(
		newSandboxCmd(a),
		newSnapshotCmd(a),
		newVolumeCmd(a),
		newExecCmd(a),
		newLogsCmd(a),
		newCancelCmd(a),
		newJobCmd(a),
		newArtifactsCmd(a),
		newCpCmd(a),
		newLsCmd(a),
		newCatCmd(a),
		newFindCmd(a),
		newReplaceCmd(a),
		newSessionCmd(a),
		newShellCmd(a),
		newContextCmd(a),
		newRunCodeCmd(a),
		newCapabilitiesCmd(a),
		newWhoamiCmd(a),
		newOpenSandboxCmd(a),
		newProfilesCmd(a),
		newImagesCmd(a),
		newNetCmd(a),
		newTenantCmd(a),
		newAuditCmd(a),
		newLeaseCmd(a),
		newPoolCmd(a),
		newPortCmd(a),
		newPortForwardCmd(a),
		newBrowserCmd(a),
		newDesktopCmd(a),
		newMCPCmd(a),
		newSkillCmd(a),
		newTraceCmd(a),
		newDiffCmd(a),
		newPatchCmd(a),
		newE2BCmd(a),
		newVersionCmd(a),
	)
	return root
}
