package docker

// Wire types of the Engine API, limited to the fields this driver uses.

type hostConfig struct {
	Binds          []string          `json:"Binds"`
	NetworkMode    string            `json:"NetworkMode"`
	CapAdd         []string          `json:"CapAdd"`
	CapDrop        []string          `json:"CapDrop"`
	SecurityOpt    []string          `json:"SecurityOpt"`
	Privileged     bool              `json:"Privileged"`
	ReadonlyRootfs bool              `json:"ReadonlyRootfs"`
	Tmpfs          map[string]string `json:"Tmpfs,omitempty"`
	Runtime        string            `json:"Runtime,omitempty"`
	Init           *bool             `json:"Init,omitempty"`
	Memory         int64             `json:"Memory"`
	MemorySwap     int64             `json:"MemorySwap"`
	NanoCpus       int64             `json:"NanoCpus"`
	PidsLimit      *int64            `json:"PidsLimit,omitempty"`
	Sysctls        map[string]string `json:"Sysctls,omitempty"`
}

type createRequest struct {
	Hostname     string            `json:"Hostname,omitempty"`
	User         string            `json:"User,omitempty"`
	Env          []string          `json:"Env"`
	Entrypoint   []string          `json:"Entrypoint,omitempty"`
	Cmd          []string          `json:"Cmd"`
	WorkingDir   string            `json:"WorkingDir,omitempty"`
	Labels       map[string]string `json:"Labels"`
	Image        string            `json:"Image"`
	AttachStdin  bool              `json:"AttachStdin"`
	AttachStdout bool              `json:"AttachStdout"`
	AttachStderr bool              `json:"AttachStderr"`
	Tty          bool              `json:"Tty"`
	OpenStdin    bool              `json:"OpenStdin"`
	HostConfig   hostConfig        `json:"HostConfig"`
}

type createResponse struct {
	ID       string   `json:"Id"`
	Warnings []string `json:"Warnings"`
}

type containerState struct {
	Status     string `json:"Status"`
	Running    bool   `json:"Running"`
	Paused     bool   `json:"Paused"`
	OOMKilled  bool   `json:"OOMKilled"`
	Pid        int    `json:"Pid"`
	ExitCode   int    `json:"ExitCode"`
	Error      string `json:"Error"`
	StartedAt  string `json:"StartedAt"`
	FinishedAt string `json:"FinishedAt"`
}

type containerJSON struct {
	ID              string         `json:"Id"`
	Name            string         `json:"Name"`
	Created         string         `json:"Created"`
	Image           string         `json:"Image"`
	State           containerState `json:"State"`
	HostConfig      hostConfig     `json:"HostConfig"`
	NetworkSettings struct {
		Networks map[string]struct {
			NetworkID string `json:"NetworkID"`
			IPAddress string `json:"IPAddress"`
		} `json:"Networks"`
	} `json:"NetworkSettings"`
	Config struct {
		Image  string            `json:"Image"`
		User   string            `json:"User"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

type containerSummary struct {
	ID      string            `json:"Id"`
	Names   []string          `json:"Names"`
	Image   string            `json:"Image"`
	Labels  map[string]string `json:"Labels"`
	State   string            `json:"State"`
	Created int64             `json:"Created"`
}

type waitResponse struct {
	StatusCode int `json:"StatusCode"`
	Error      *struct {
		Message string `json:"Message"`
	} `json:"Error"`
}

type infoResponse struct {
	ServerVersion     string `json:"ServerVersion"`
	KernelVersion     string `json:"KernelVersion"`
	CgroupVersion     string `json:"CgroupVersion"`
	ExperimentalBuild bool   `json:"ExperimentalBuild"`
	DefaultRuntime    string `json:"DefaultRuntime"`
	Runtimes          map[string]struct {
		Path string   `json:"path"`
		Args []string `json:"runtimeArgs"`
	} `json:"Runtimes"`
}

type progressMessage struct {
	Status      string `json:"status"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}
