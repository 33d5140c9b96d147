// Package skills keeps a tenant's Skills and runs their scripts in
// sandboxes.
//
// A skill is a folder with SKILL.md (YAML front matter: name, description,
// optional license, allowed-tools and metadata) and the files its
// instructions use. A push (Parse) reads a tar, tar.gz or zip of it,
// refusing entries that escape the folder, links, special files and a
// missing or malformed SKILL.md, and stores an immutable revision: its
// files, its content digest (Digest: independent of the archive format),
// and a static report (scripts by language, hosts named, secret-like
// strings). The same content pushed again is the same revision.
//
// A run (Run) executes one of the revision's own files in a sandbox of its
// own: the revision unpacked on the host (its digest checked again on
// every run, unpacked anew from the stored archive when it differs) and
// mounted read-only at /skill, the request's files in /workspace, and
// whatever the script writes below /workspace/out kept as the job's
// artifacts. The risk rule (Decide): a tenant's upload is unsigned, risk
// medium, so runsc; declared hosts become an egress allowlist of exactly
// those when the operator allows network, and no network otherwise. The
// sandbox is removed when the run ends.
//
// MCPHandler serves the same to any MCP client: the tenant's skills as
// resources, list_skills and run_skill_script as tools.
//
// It keeps revisions through the store contract (store.Skills) and
// reaches sandboxes through control, jobs, files and artifacts; it never
// imports the API, a driver, the job log or the agent client.
package skills
