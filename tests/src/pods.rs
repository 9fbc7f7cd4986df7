//! Runs the containers of rendered Kubernetes manifests as local processes,
//! the way a kubelet would configure them: the container's command (mapped from
//! the image's `/usr/local/bin` to the built binaries), its environment with
//! `$(VAR)` references expanded and `fieldRef`/`secretKeyRef`/`configMapKeyRef`
//! resolved from the rendered objects, and its volumes (ConfigMaps, Secrets,
//! volume claims, emptyDirs) as directories, every mount path in the
//! environment pointing at the directory standing in for it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;

use anyhow::{Context, Result, bail, ensure};
use base64::Engine;
use serde_json::Value;

/// The rendered objects of a release, by kind and name.
pub struct Rendered {
    objects: Vec<Value>,
}

impl Rendered {
    /// The manifests as `[{"template", "manifest"}]` (helm/tests/chart.py render).
    pub fn from_chart_output(json: &Value) -> Result<Rendered> {
        let list = json.as_array().context("rendered manifests: not a list")?;
        Ok(Rendered { objects: list.iter().map(|m| m["manifest"].clone()).collect() })
    }

    /// The one object of `kind` (and with `name`, when given).
    pub fn object(&self, kind: &str, name: Option<&str>) -> Result<&Value> {
        let mut found = self.objects.iter().filter(|o| o["kind"] == kind && name.is_none_or(|n| o["metadata"]["name"] == n));
        let first = found.next().with_context(|| format!("no {kind} {name:?} rendered"))?;
        ensure!(found.next().is_none(), "more than one {kind} {name:?} rendered");
        Ok(first)
    }

    /// The decoded value of `key` in the rendered Secret `name`.
    pub fn secret_value(&self, name: &str, key: &str) -> Result<String> {
        let secret = self.object("Secret", Some(name))?;
        if let Some(v) = secret["stringData"][key].as_str() {
            return Ok(v.to_string());
        }
        let b64 = secret["data"][key].as_str().with_context(|| format!("Secret {name} has no key {key}"))?;
        Ok(String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64)?)?)
    }

    fn config_map_value(&self, name: &str, key: &str) -> Result<String> {
        let cm = self.object("ConfigMap", Some(name))?;
        Ok(cm["data"][key].as_str().with_context(|| format!("ConfigMap {name} has no key {key}"))?.to_string())
    }
}

/// One pod of a workload, as the processes' host sees it.
pub struct Pod<'a> {
    pub rendered: &'a Rendered,
    /// The pod template (`spec.template`) of a StatefulSet or Deployment.
    pub template: &'a Value,
    /// The pod's name (its `HOSTNAME`).
    pub name: String,
    /// The address standing for the pod's IP (`status.podIP`).
    pub ip: String,
    /// Labels the platform puts on the pod besides its template's, e.g.
    /// `topology.kubernetes.io/zone` (copied from its Kubernetes node by the
    /// PodTopologyLabels admission); read by `metadata.labels['...']` references.
    pub labels: BTreeMap<String, String>,
    /// Where the pod's volumes are laid out.
    pub root: PathBuf,
}

/// A container made ready to run: binary, environment and the port numbers
/// its named ports stand for.
pub struct Prepared {
    pub binary: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub ports: BTreeMap<String, u16>,
    pub container: Value,
}

impl Prepared {
    /// The port a probe of the container names (by name or number).
    pub fn probe_port(&self, probe: &Value) -> Result<u16> {
        let port = &probe["httpGet"]["port"];
        match port {
            Value::Number(n) => Ok(n.as_u64().context("port")? as u16),
            Value::String(name) => self.ports.get(name).copied().with_context(|| format!("no container port named {name}")),
            _ => bail!("probe without an httpGet port: {probe}"),
        }
    }

    /// Runs the container's `lifecycle.<hook>.exec` command (`preStop`,
    /// `postStart`) with the container's environment, to completion; answers
    /// its exit status and output.
    pub fn run_hook(&self, hook: &str, bin_dir: &Path, cwd: &Path) -> Result<(std::process::ExitStatus, String)> {
        let command = self.container["lifecycle"][hook]["exec"]["command"].as_array().with_context(|| format!("no {hook} exec hook"))?;
        let words: Vec<String> =
            command.iter().map(|w| w.as_str().map(str::to_string).context("a non-string word")).collect::<Result<_>>()?;
        let (program, args) = words.split_first().context("an empty hook command")?;
        let program = match program.strip_prefix("/usr/local/bin/") {
            Some(file) => bin_dir.join(file),
            None => PathBuf::from(program),
        };
        let out = std::process::Command::new(&program)
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .output()
            .with_context(|| format!("running the {hook} hook {}", program.display()))?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        Ok((out.status, text))
    }

    /// `(path, port)` of the container's `kind` probe (`startupProbe`, `readinessProbe`, ...).
    pub fn probe(&self, kind: &str) -> Result<(String, u16)> {
        let probe = &self.container[kind];
        let path = probe["httpGet"]["path"].as_str().with_context(|| format!("no {kind} httpGet path"))?;
        Ok((path.to_string(), self.probe_port(probe)?))
    }
}

impl Pod<'_> {
    /// The container `name` of the pod, with its volumes laid out under `root`.
    pub fn prepare(&self, name: &str, bin_dir: &Path) -> Result<Prepared> {
        let containers = self.template["spec"]["containers"].as_array().context("pod without containers")?;
        let container = containers.iter().find(|c| c["name"] == name).with_context(|| format!("no container {name}"))?;
        let command = container["command"].as_array().context("container without a command")?;
        let image_path = command.first().and_then(Value::as_str).context("empty command")?;
        let args: Vec<String> = command[1..]
            .iter()
            .chain(container["args"].as_array().into_iter().flatten())
            .map(|a| a.as_str().map(str::to_string).context("a non-string argument"))
            .collect::<Result<_>>()?;
        // The image's own binaries are the ones built here; its system tools
        // (`/bin/sh`, `curl`) are this machine's.
        let binary = match image_path.strip_prefix("/usr/local/bin/") {
            Some(file) => bin_dir.join(file),
            None => {
                ensure!(Path::new(image_path).is_file(), "{image_path} is not on this machine");
                PathBuf::from(image_path)
            }
        };

        // Volumes: mount path -> local directory.
        let volumes: BTreeMap<String, &Value> = self.template["spec"]["volumes"]
            .as_array()
            .map(|v| v.iter().filter_map(|v| Some((v["name"].as_str()?.to_string(), v))).collect())
            .unwrap_or_default();
        let mut mounts: Vec<(String, PathBuf)> = Vec::new();
        for m in container["volumeMounts"].as_array().into_iter().flatten() {
            let (vname, path) = (m["name"].as_str().context("mount name")?, m["mountPath"].as_str().context("mountPath")?);
            let dir = self.root.join(format!("{}{}", self.name, path.replace('/', "_")));
            std::fs::create_dir_all(&dir)?;
            match volumes.get(vname) {
                Some(v) if v["configMap"].is_object() => {
                    let cm = v["configMap"]["name"].as_str().context("configMap name")?;
                    let data = &self.rendered.object("ConfigMap", Some(cm))?["data"];
                    for (key, value) in data.as_object().into_iter().flatten() {
                        std::fs::write(dir.join(key), value.as_str().unwrap_or_default())?;
                    }
                }
                Some(v) if v["secret"].is_object() => {
                    let secret = v["secret"]["secretName"].as_str().context("secretName")?;
                    let items: Vec<(String, String)> = match v["secret"]["items"].as_array() {
                        Some(items) => {
                            items.iter().filter_map(|i| Some((i["key"].as_str()?.to_string(), i["path"].as_str()?.to_string()))).collect()
                        }
                        None => self.rendered.object("Secret", Some(secret))?["data"]
                            .as_object()
                            .map(|d| d.keys().map(|k| (k.clone(), k.clone())).collect())
                            .unwrap_or_default(),
                    };
                    for (key, path) in items {
                        std::fs::write(dir.join(path), self.rendered.secret_value(secret, &key)?)?;
                    }
                }
                Some(v) if v["emptyDir"].is_object() => {}
                // Not a pod volume: a volume claim template of the StatefulSet (an empty data directory).
                None => {}
                other => bail!("volume {vname} ({other:?}) is not emulated"),
            }
            mounts.push((path.to_string(), dir));
        }
        let local = |value: &str| -> String {
            for (path, dir) in &mounts {
                if let Some(rest) = value.strip_prefix(path.as_str())
                    && (rest.is_empty() || rest.starts_with('/'))
                {
                    return format!("{}{rest}", dir.display());
                }
            }
            value.to_string()
        };

        let mut env: Vec<(String, String)> = vec![("HOSTNAME".into(), self.name.clone())];
        for e in container["env"].as_array().into_iter().flatten() {
            let key = e["name"].as_str().context("env name")?.to_string();
            let value = if let Some(v) = e["value"].as_str() {
                local(&expand(v, &env))
            } else if let Some(field) = e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                match (field, label_reference(field)) {
                    ("status.podIP", _) => self.ip.clone(),
                    ("metadata.name", _) => self.name.clone(),
                    // A label the pod lacks reads as empty, as in Kubernetes.
                    (_, Some(label)) => self
                        .labels
                        .get(label)
                        .cloned()
                        .or_else(|| self.template["metadata"]["labels"][label].as_str().map(str::to_string))
                        .unwrap_or_default(),
                    (other, None) => bail!("fieldRef {other} is not emulated"),
                }
            } else if e["valueFrom"]["secretKeyRef"].is_object() {
                let r = &e["valueFrom"]["secretKeyRef"];
                self.rendered.secret_value(r["name"].as_str().context("secret name")?, r["key"].as_str().context("key")?)?
            } else if e["valueFrom"]["configMapKeyRef"].is_object() {
                let r = &e["valueFrom"]["configMapKeyRef"];
                self.rendered.config_map_value(r["name"].as_str().context("name")?, r["key"].as_str().context("key")?)?
            } else if e["value"].is_null() && e["valueFrom"].is_null() {
                String::new()
            } else {
                bail!("env {key}: {e} is not emulated")
            };
            env.push((key, value));
        }
        let ports = container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p["name"].as_str()?.to_string(), p["containerPort"].as_u64()? as u16)))
            .collect();
        Ok(Prepared { binary, args, env, ports, container: container.clone() })
    }

    /// Starts the prepared container, its output in `<root>/<pod>.log`.
    pub fn start(&self, prepared: &Prepared) -> Result<(Child, PathBuf)> {
        let log = self.root.join(format!("{}.log", self.name));
        let child = crate::spawn_with_args(&prepared.binary, &prepared.args, &prepared.env, &log, &self.root, &self.name)?;
        Ok((child, log))
    }
}

/// The label key of a downward-API `metadata.labels['key']` field path.
fn label_reference(field: &str) -> Option<&str> {
    let key = field.strip_prefix("metadata.labels[")?.strip_suffix(']')?;
    key.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')).or_else(|| key.strip_prefix('"').and_then(|k| k.strip_suffix('"')))
}

/// `$(VAR)` references to variables defined earlier in the list expanded, as
/// Kubernetes does (`$$` escapes; unknown references stay as written).
pub fn expand(value: &str, earlier: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(end) = tail.strip_prefix("$(").and_then(|t| t.find(')')) {
            let name = &tail[2..2 + end];
            match earlier.iter().rev().find(|(k, _)| k == name) {
                Some((_, v)) => out.push_str(v),
                None => out.push_str(&tail[..3 + end]),
            }
            rest = &tail[3 + end..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::{expand, label_reference};

    #[test]
    fn label_references_name_their_key() {
        assert_eq!(label_reference("metadata.labels['topology.kubernetes.io/zone']"), Some("topology.kubernetes.io/zone"));
        assert_eq!(label_reference("metadata.labels[\"app\"]"), Some("app"));
        assert_eq!(label_reference("metadata.name"), None);
    }

    #[test]
    fn references_expand_like_kubernetes() {
        let env = vec![("POD_IP".to_string(), "10.0.0.7".to_string())];
        assert_eq!(expand("$(POD_IP):9191", &env), "10.0.0.7:9191");
        assert_eq!(expand("$(NOPE)-$$(POD_IP)-$", &env), "$(NOPE)-$(POD_IP)-$");
    }
}
