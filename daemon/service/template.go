package service

import (
	"fmt"
	"strconv"
	"strings"
	"text/template"

	kardianos "github.com/kardianos/service"
)

// launchdTemplate is tfd's LaunchdConfig: kardianos/service's template syntax ({{Key}},
// {{Key | fn}}, {{if}}, {{range}}, no dotted fields) over the keys kardianos fills, with what
// kardianos does not emit written in: ProcessType Interactive (no CPU and I/O throttling for an
// inference daemon), ExitTimeOut for the graceful stop, ThrottleInterval, the open-file limit,
// the group and the umask. UserName and GroupName run tfd as _tfd, never root; Umask 027 (23)
// keeps what it writes from others. StandardOutPath and StandardErrorPath both name tfd.log,
// which tfd also opens itself (--log-file) to follow its rotation: launchd's descriptors catch
// only what is printed before tfd has opened it.
const launchdTemplate = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>{{Name | html}}</string>
	<key>ProgramArguments</key>
	<array>
		<string>{{Path | html}}</string>
{{range Arguments}}		<string>{{. | html}}</string>
{{end}}	</array>
	<key>RunAtLoad</key>
	<{{RunAtLoad}}/>
	<key>KeepAlive</key>
	<{{KeepAlive}}/>
	<key>UserName</key>
	<string>{{UserName | html}}</string>
	<key>GroupName</key>
	<string>{{UserName | html}}</string>
	<key>Umask</key>
	<integer>23</integer>
	<key>ProcessType</key>
	<string>Interactive</string>
	<key>ExitTimeOut</key>
	<integer>` + stopSecondsText + `</integer>
	<key>ThrottleInterval</key>
	<integer>10</integer>
	<key>SoftResourceLimits</key>
	<dict>
		<key>NumberOfFiles</key>
		<integer>65536</integer>
	</dict>
	<key>WorkingDirectory</key>
	<string>{{WorkingDirectory | html}}</string>
	<key>StandardOutPath</key>
	<string>{{StandardOutPath | html}}</string>
	<key>StandardErrorPath</key>
	<string>{{StandardErrorPath | html}}</string>
</dict>
</plist>
`

// systemdTemplate is tfd's SystemdScript, in kardianos/service's template syntax over the keys
// it fills. Restart=always with a short RestartSec brings tfd back quickly after a crash;
// TimeoutStopSec fits the graceful stop; output goes to the journal (journalctl -u tfd).
//
// tfd runs as a user systemd makes at each start (DynamicUser), in a read-only view of the
// system: it writes only its StateDirectory (/var/lib/tfd, the working folder) and its
// CacheDirectory (/var/cache/tfd, for prompt_cache.spill_dir), and home folders are hidden.
// Left out on purpose, since each would cut the service off from an NVIDIA GPU: PrivateDevices
// (hides /dev/nvidia*), ProtectClock and DeviceAllow (any device rule closes the device list),
// ProcSubset=pid (hides /proc/driver/nvidia), MemoryDenyWriteExecute (CUDA's driver maps code
// it compiles). SystemCallFilter and RestrictAddressFamilies are left out until tried against
// the driver's ioctls and sockets on a GPU machine. No SupplementaryGroups either: the driver
// makes /dev/nvidia* 0666 by default, video and render guard only /dev/dri, and a group the
// machine lacks would keep the unit from starting.
const systemdTemplate = `[Unit]
Description={{Description}}
ConditionFileIsExecutable={{Path | cmdEscape}}
{{range Dependencies}}{{.}}
{{end}}
[Service]
ExecStart={{Path | cmdEscape}}{{range Arguments}} {{. | cmd}}{{end}}
WorkingDirectory={{WorkingDirectory | cmdEscape}}
Restart={{Restart}}
RestartSec=5
TimeoutStopSec=` + stopSecondsText + `
KillSignal=SIGTERM
LimitNOFILE={{LimitNOFILE}}
DynamicUser=yes
StateDirectory=tfd
CacheDirectory=tfd
UMask=0027
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectControlGroups=yes
ProtectKernelLogs=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictSUIDSGID=yes
RestrictRealtime=yes
RestrictNamespaces=yes
LockPersonality=yes
SystemCallArchitectures=native
CapabilityBoundingSet=

[Install]
WantedBy=multi-user.target
`

// stopSecondsText is serviceStopSeconds as the templates write it; a test keeps them equal.
const stopSecondsText = "30"

// plistEscaper escapes XML text as kardianos' html function does.
var plistEscaper = strings.NewReplacer(`&`, "&amp;", `'`, "&#39;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;")

// renderLaunchd renders c's LaunchdConfig with the values kardianos' launchd Install gives it,
// except the log paths, which name logFile.
func renderLaunchd(c *kardianos.Config, logFile string) (string, error) {
	data := map[string]any{
		"Name":              c.Name,
		"Path":              c.Executable,
		"Arguments":         c.Arguments,
		"WorkingDirectory":  c.WorkingDirectory,
		"KeepAlive":         strconv.FormatBool(optionBool(c, "KeepAlive")),
		"RunAtLoad":         strconv.FormatBool(optionBool(c, "RunAtLoad")),
		"UserName":          c.UserName,
		"StandardOutPath":   logFile,
		"StandardErrorPath": logFile,
	}
	funcs := map[string]func(string) string{"html": plistEscaper.Replace}
	return renderKardianos(c.Option["LaunchdConfig"].(string), data, funcs)
}

// renderSystemd renders c's SystemdScript with the values kardianos' systemd Install gives it.
func renderSystemd(c *kardianos.Config) (string, error) {
	data := map[string]any{
		"Description":      c.Description,
		"Path":             c.Executable,
		"Dependencies":     c.Dependencies,
		"Arguments":        c.Arguments,
		"WorkingDirectory": c.WorkingDirectory,
		"Restart":          fmt.Sprint(c.Option["Restart"]),
		"LimitNOFILE":      fmt.Sprint(c.Option["LimitNOFILE"]),
	}
	funcs := map[string]func(string) string{
		"cmd":       func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` },
		"cmdEscape": func(s string) string { return strings.ReplaceAll(s, " ", `\x20`) },
	}
	return renderKardianos(c.Option["SystemdScript"].(string), data, funcs)
}

func optionBool(c *kardianos.Config, key string) bool {
	b, _ := c.Option[key].(bool)
	return b
}

// renderKardianos renders a template in kardianos/service's syntax. That syntax is the part of
// text/template where every key is a function of no arguments, so each key of data becomes one;
// kardianos' own renderer is unexported. Values are strings or string lists, as there.
func renderKardianos(text string, data map[string]any, funcs map[string]func(string) string) (string, error) {
	fm := template.FuncMap{}
	for k, v := range data {
		fm[k] = func() any { return v }
	}
	for k, f := range funcs {
		fm[k] = f
	}
	t, err := template.New("service").Funcs(fm).Option("missingkey=error").Parse(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, nil); err != nil {
		return "", err
	}
	return b.String(), nil
}
